# A two-point stencil on every PE of every vault, with a halo fetched from the other
# vaults by req and a barrier per sweep: the program behind the cube's speed figure
#   pimforge simb run examples/ipim_stencil.s --config ipim_small --rtl
# Each sweep: out[i] = 0.5 * (in[i] + in[i + 1]) for 64 vectors of each PE's bank
# (in at 0.., out at 1024..), then four req (one from each vault), then sync.
        seti_vsm [0], 1
        seti_vsm [1], 1024
        seti_vsm [2], fp32(0.5)
        rd_vsm d7, [0]
        rd_vsm d8, [1]
        rd_vsm d9, [2]
        mov_arf a5, d7[0]           # a5 = 1
        seti_crf c1, @loop
        seti_crf c2, 1
        seti_crf c3, @sweep
        seti_crf c4, 8              # sweeps
sweep:  mov_arf a4, d7[1]           # a4 = 0 (lane 1 of d7 is 0)
        mov_arf a6, d8[0]           # a6 = 1024
        seti_crf c0, 64             # vectors per sweep
loop:   ld_rf d1, [a4]
        calc_arf.add a4, a4, a5
        ld_rf d2, [a4]
        comp.fp32.add d0, d1, d2
        comp.fp32.mul d0, d9[0], d0
        st_rf [a6], d0
        calc_arf.add a6, a6, a5
        calc_crf.sub c0, c0, c2
        cjump.nz c0, c1
        req [16], [0] vault=0 pg=0 pe=0
        req [17], [1] vault=1 pg=0 pe=1
        req [18], [2] vault=2 pg=1 pe=0
        req [19], [3] vault=3 pg=1 pe=1
        sync 1
        calc_crf.sub c4, c4, c2
        cjump.nz c4, c3
        halt

"""iPIM's simulation side: the ``pimforge simb`` tools, the image compiler and its drivers.

The image compiler runs as an ordered list of passes, :data:`.passes.PASSES`, each a
function from one IR value to the next that prints as text (``pimforge compile image
--dump-ir DIR``):

1. ``graph``: the front end's (:mod:`.lang`) funcs resolved into root arrays, producers
   first (:func:`.lower.build_graph`);
2. ``bounds``: every array's rows per PE and halo, returned (:mod:`.bounds`);
3. ``layout``: the bounds written into the arrays, their bank bases, the DataRF
   constants (:func:`.lower.lay_out`);
4. ``select``: every vault's kernels as instructions and basic blocks on virtual
   registers (:func:`.lower.select`, :mod:`.lower_grid`, :mod:`.lower_hist`, :mod:`.emit`);
5. ``preschedule``: windows of unrolled iterations and software-pipelined loops ordered
   by Algorithm 1 on virtual registers (:mod:`.backend`);
6. ``regalloc``: DataRF registers allocated (:mod:`.backend`);
7. ``reorder``: Algorithm 1 on the allocated blocks (:mod:`.backend`);
8. ``assemble``: every vault's program, repeated stages folded into loops
   (:func:`.emit.assemble`), as a :class:`.layout.Program`.
"""

"""Measure the GPU baselines on a real GPU: PyTorch dynamic routing and DNN inference.

The project's GPU baselines are models (``pimforge.sim.capsnet.gpu_roofline`` and
``gpu_eager`` for PIM-CapsNet, ``pimforge.sim.nicepim.gpu_roofline`` for NicePIM's V100
comparison). This script measures what those models describe, on whatever CUDA GPU it
finds, so that the models can be checked against a measurement made on the same GPU:

    python scripts/gpu/gpu_measure.py --json OUT.json [--budget-s 420] [--quick]

needs PyTorch with CUDA (and ``transformers`` for BERT; without it BERT is skipped) and
numpy; pimforge itself need not be installed (the repository's root on ``PYTHONPATH``
through a ``pimforge`` folder of links is enough: it reads only the network tables and
the numpy routing reference). Nothing in the project needs it. What it measures:

* **the GPU's own peaks**: a device-to-device copy (bytes read + written per second), an
  FP32 matrix product with TF32 off, an FP16 one on the tensor cores, and the time of
  one eager PyTorch op on a one-element tensor (dispatch + launch: the eager model's
  ``launch_s``);
* **PIM-CapsNet (Table 1, full size)**: the routing written as public PyTorch CapsNets
  write it (``pimforge.sim.capsnet.gpu_eager``'s module docstring, with ``b`` shared by
  the batch and Eq. 4 summing the agreements over it, as Algorithm 1 and
  ``pimforge.verif.models.capsnet.routing`` do), and the whole inference around it (Conv1,
  PrimaryCaps, squash, routing, masked FC decoder) with the structure the models assume.
  Before timing, each network's routing at 1/4 size is checked against the float64
  numpy reference ``route_f64`` (in float64 on the GPU: the same result to 1e-9; in
  float32: within 1e-4). The CUDA kernels each run launches are counted with
  ``torch.profiler``, beside the eager model's count; one Caps-MN1 routing is profiled
  kernel by kernel (``routing_profile``: launches and GPU time per kernel name);
* **NicePIM's five networks**: the CNNs built layer by layer from
  ``pimforge.sim.nicepim.networks`` (every layer's output shape checked against the
  table), BERT-base from ``transformers`` (``BertModel`` of the base configuration,
  sequence 128, with the pooler), in FP32 (TF32 off) and FP16, eagerly and as a
  replayed CUDA graph, at batches 1, 2, 4, ... until the time per sample stops falling
  or memory runs out (at most 1024).

Times are CUDA-event times of one call, the median of ``--reps`` after warm-up runs.
The JSON is rewritten after each part (so a run stopped at its time budget keeps what
it measured); ``--budget-s`` skips what would start after that many seconds.

``python scripts/gpu/gpu_report.py --json OUT.json`` sets the models, evaluated at the
measured peaks, beside these measurements (no GPU needed).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import traceback

import numpy as np

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:  # pragma: no cover - reported by main()
    torch = None

from pimforge.gen.args import int_range, number_range, out_file
from pimforge.gen.output import write_json
from pimforge.sim.capsnet.networks import NETWORKS as CAPSNETS
from pimforge.sim.nicepim.networks import network, network_names
from pimforge.verif.models.capsnet.routing import route_f64

T0 = time.perf_counter()
PARTS = ("peaks", "capsnet", "profile", "dnn")
#: Where it runs: ``cuda``; ``--device cpu`` runs the same code paths on the CPU, small,
#: to check the script itself where no GPU is.
DEV = None


def _elapsed() -> float:
    return time.perf_counter() - T0


def _sync() -> None:
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def cuda_time(fn, warmup: int, reps: int) -> dict:
    """Median and minimum CUDA-event time (seconds) of ``fn()`` (wall time off CUDA)."""
    for _ in range(warmup):
        fn()
    _sync()
    ts = []
    for _ in range(reps):
        if DEV.type == "cuda":
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) * 1e-3)
        else:
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return {"median_s": statistics.median(ts), "min_s": min(ts), "reps": reps}


def kernel_count(fn) -> int:
    """CUDA kernels (and memset/memcpy ops) one call of ``fn`` launches."""
    from torch.profiler import ProfilerActivity, profile
    if DEV.type != "cuda":
        return 0
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    n = 0
    for ev in prof.events():
        dt = getattr(ev, "device_type", None)
        if dt is not None and "CUDA" in str(dt):
            n += 1
    return n


# ---------------------------------------------------------------------------------------
# The GPU's own peaks


def peaks(quick: bool) -> dict:
    dev = DEV
    n = (1 << 26) if quick else (1 << 28)           # float32 elements: 256 MiB / 1 GiB
    x = torch.empty(n, device=dev)
    y = torch.empty_like(x)
    t = cuda_time(lambda x=x, y=y: y.copy_(x), 3, 20)
    bw = 2 * 4 * n / t["min_s"]
    del x, y
    out = {"copy_bytes_per_s": bw, "copy_bytes": 2 * 4 * n}
    m = 4096 if quick else 8192
    for label, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
        a = torch.randn(m, m, device=dev, dtype=dtype)
        b = torch.randn(m, m, device=dev, dtype=dtype)
        t = cuda_time(lambda a=a, b=b: a @ b, 3, 10)
        out[f"{label}_matmul_flops_per_s"] = 2 * m ** 3 / t["min_s"]
        del a, b
    out["matmul_n"] = m
    one = torch.zeros(1, device=dev)
    reps = 2000

    def ops():
        for _ in range(reps):
            one.add_(1)
    t = cuda_time(ops, 2, 5)
    out["eager_op_s"] = t["median_s"] / reps
    return out


# ---------------------------------------------------------------------------------------
# PIM-CapsNet


def routing(u, W, iterations: int):
    """Dynamic routing as public PyTorch CapsNets write it (shared ``b``, Eq. 4 summed
    over the batch as in Algorithm 1). ``u`` (B, N_L, C_L), ``W`` (N_L, N_H, C_H, C_L).
    Returns v (B, N_H, C_H), s (B, N_H, C_H), c (N_L, N_H), b (N_L, N_H)."""
    B, nl, _ = u.shape
    # Eq. 1 by broadcast matmul: W over the batch, u over N_H, both materialized
    u_hat = torch.matmul(W.unsqueeze(0), u[:, :, None, :, None]).squeeze(-1)  # B,NL,NH,CH
    b = torch.zeros(nl, W.shape[1], 1, device=u.device, dtype=u.dtype)
    for _ in range(iterations):
        c = F.softmax(b, dim=1)                                   # Eq. 5 over N_H
        cb = torch.cat([c.unsqueeze(0)] * B, dim=0)               # c over the batch
        s = (cb * u_hat).sum(dim=1, keepdim=True)                 # Eq. 2, B,1,NH,CH
        sq = (s ** 2).sum(-1, keepdim=True)
        v = sq * s / ((1.0 + sq) * torch.sqrt(sq))                # Eq. 3
        vb = torch.cat([v] * nl, dim=1)                           # v over N_L
        a = torch.matmul(u_hat.unsqueeze(-2), vb.unsqueeze(-1)).squeeze(-1)  # Eq. 4
        b = b + a.sum(dim=0)
    return v.squeeze(1), s.squeeze(1), c.squeeze(-1), b.squeeze(-1)


def _squash(x, dim=-1):
    sq = (x ** 2).sum(dim, keepdim=True)
    return sq * x / ((1.0 + sq) * torch.sqrt(sq))


class CapsNet(nn.Module):
    """The whole inference the models assume: Conv1 9x9x256 + ReLU on 28x28xC, PrimaryCaps
    9x9/2 to N_L capsules of 8 on a 6x6 grid + squash, the routing, the masked FC decoder
    C_H N_H -> 512 -> 1024 -> 784 C."""

    def __init__(self, net):
        super().__init__()
        self.net = net
        pc = net.n_l * net.c_l // 36
        self.conv1 = nn.Conv2d(net.in_channels, 256, 9)
        self.prim = nn.Conv2d(256, pc, 9, stride=2)
        self.W = nn.Parameter(0.05 * torch.randn(net.n_l, net.n_h, net.c_h, net.c_l))
        self.dec = nn.Sequential(nn.Linear(net.c_h * net.n_h, 512), nn.ReLU(),
                                 nn.Linear(512, 1024), nn.ReLU(),
                                 nn.Linear(1024, 784 * net.in_channels), nn.Sigmoid())

    def forward(self, x):
        n = self.net
        y = self.prim(F.relu(self.conv1(x)))
        u = _squash(y.permute(0, 2, 3, 1).contiguous().view(x.shape[0], n.n_l, n.c_l))
        v, *_ = routing(u, self.W, n.iterations)
        length = torch.sqrt((v ** 2).sum(-1))
        mask = torch.eye(n.n_h, device=x.device)[length.argmax(dim=1)]
        return self.dec((v * mask.unsqueeze(-1)).flatten(1))


def _routing_inputs(net):
    """Seeded ``u`` (squashed) and ``W`` of *net* on the device."""
    torch.manual_seed(0)
    u = _squash(torch.rand(net.batch, net.n_l, net.c_l, device=DEV) - 0.5)
    W = 0.05 * torch.randn(net.n_l, net.n_h, net.c_h, net.c_l, device=DEV)
    return u, W


def _capsnets(args):
    """The Table 1 networks at ``--capsnet-scale``."""
    return [n.scaled(args.capsnet_scale) if args.capsnet_scale > 1 else n for n in CAPSNETS]


def check_routing(net, dev) -> dict:
    """The routing of *net* at 1/4 size on the GPU against the float64 numpy reference."""
    small = net.scaled(4)
    rng = np.random.default_rng(1234)
    u = rng.uniform(-0.5, 0.5, (small.batch, small.n_l, small.c_l))
    W = rng.normal(0.0, 0.05, (small.n_l, small.n_h, small.c_h, small.c_l))
    ref = route_f64(u, W, small.iterations)
    out = {"scaled": 4, "seed": 1234}
    for label, dtype in (("fp64", torch.float64), ("fp32", torch.float32)):
        v, s, c, b = routing(torch.tensor(u, dtype=dtype, device=dev),
                             torch.tensor(W, dtype=dtype, device=dev), small.iterations)
        out[f"{label}_max_abs_error_v"] = float(np.abs(v.double().cpu().numpy() - ref.v).max())
        out[f"{label}_max_abs_error_b"] = float(np.abs(b.double().cpu().numpy() - ref.b).max())
    out["matches_reference"] = (out["fp64_max_abs_error_v"] < 1e-9
                                and out["fp32_max_abs_error_v"] < 1e-4)
    return out


def measure_capsnet(args, result, path) -> None:
    dev = DEV
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = result.setdefault("capsnet", {})
    for net in _capsnets(args):
        if net.name in rows:
            continue
        if _elapsed() > args.budget_s:
            result.setdefault("skipped", []).append(f"capsnet {net.name}: time budget")
            continue
        row = {"check": check_routing(net, dev)}
        with torch.inference_mode():
            u, W = _routing_inputs(net)
            model = CapsNet(net).to(dev).eval()
            x = torch.rand(net.batch, net.in_channels, 28, 28, device=dev)

            def rt(u=u, W=W, net=net):
                return routing(u, W, net.iterations)

            def whole(model=model, x=x):
                return model(x)
            row["routing"] = cuda_time(rt, 2, args.reps)
            row["routing"]["kernels"] = kernel_count(rt)
            if dev.type == "cuda":       # the same kernels without the launch gaps
                fn, g = graph_fn(rt)
                row["routing_graph"] = cuda_time(fn, 2, args.reps)
                del g
            row["whole"] = cuda_time(whole, 2, args.reps)
            row["whole"]["kernels"] = kernel_count(whole)
        row["routing_share"] = row["routing"]["median_s"] / row["whole"]["median_s"]
        rows[net.name] = row
        del u, W, model, x
        torch.cuda.empty_cache()
        print(f"{net.name}: routing {row['routing']['median_s'] * 1e3:.3f} ms "
              f"({row['routing']['kernels']} kernels), whole "
              f"{row['whole']['median_s'] * 1e3:.3f} ms, check "
              f"{row['check']['matches_reference']}", flush=True)
        write_json(path, result)


def profile_routing(args, result, path) -> None:
    """Where the routing's GPU time goes: the profiler's kernels of one Caps-MN1 routing,
    grouped by name, with their time and launch count."""
    from torch.profiler import ProfilerActivity, profile
    net = _capsnets(args)[0]
    with torch.inference_mode():
        u, W = _routing_inputs(net)
        for _ in range(3):
            routing(u, W, net.iterations)
        _sync()
        act = ProfilerActivity.CUDA if DEV.type == "cuda" else ProfilerActivity.CPU
        with profile(activities=[act]) as prof:
            routing(u, W, net.iterations)
            _sync()
    kernels: dict[str, list] = {}
    for ev in prof.events():
        if DEV.type.upper() not in str(getattr(ev, "device_type", "")):
            continue
        k = kernels.setdefault(ev.name, [0, 0.0])
        k[0] += 1
        k[1] += ev.time_range.elapsed_us() * 1e-6
    top = sorted(kernels.items(), key=lambda kv: -kv[1][1])
    result["routing_profile"] = {
        "network": net.name,
        "kernels": [{"name": n[:160], "launches": c, "seconds": t} for n, (c, t) in top]}
    for n, (c, t) in top[:12]:
        print(f"{t * 1e3:9.3f} ms {c:4d}x {n[:110]}", flush=True)


# ---------------------------------------------------------------------------------------
# NicePIM's DNNs


class TableNet(nn.Module):
    """A CNN of ``pimforge.sim.nicepim.networks`` built layer by layer."""

    def __init__(self, net):
        super().__init__()
        self.net = net
        self.mods = nn.ModuleDict()
        for lay in net.layers:
            seq = []
            if lay.kind == "conv":
                seq.append(nn.Conv2d(lay.c, lay.k, (lay.r, lay.s), lay.stride, lay.pad,
                                     groups=lay.groups, bias=lay.bias))
            elif lay.kind == "fc":
                seq += [nn.Flatten(), nn.Linear(lay.c * lay.h * lay.w, lay.k, bias=lay.bias)]
            elif lay.kind == "maxpool":
                floor = (lay.h + 2 * lay.pad - lay.r) // lay.stride + 1
                seq.append(nn.MaxPool2d((lay.r, lay.s), lay.stride, lay.pad,
                                        ceil_mode=floor != lay.p))
            elif lay.kind == "avgpool":
                seq.append(nn.AdaptiveAvgPool2d((lay.p, lay.q)))
            elif lay.kind not in ("input", "add", "concat"):
                raise ValueError(f"{net.name}: layer kind {lay.kind} is not a CNN's")
            for op in lay.post:
                seq.append({"bn": lambda k=lay.k, fc=lay.kind == "fc":
                            nn.BatchNorm1d(k) if fc else nn.BatchNorm2d(k),
                            "relu": nn.ReLU, "leaky": lambda: nn.LeakyReLU(0.1),
                            "tanh": nn.Tanh, "gelu": nn.GELU}[op]())
            self.mods[lay.name.replace(".", "_")] = nn.Sequential(*seq)

    def forward(self, x, check: bool = False):
        """The network on *x*; with *check*, every layer's output shape is checked
        against the table's (k, p, q)."""
        out = {}
        for lay in self.net.layers:
            ins = [x] if lay.kind == "input" else [out[p] for p in lay.preds]
            if lay.kind == "add":
                y = sum(ins[1:], ins[0])
            elif lay.kind == "concat":
                y = torch.cat(ins, dim=1)
            else:
                y = ins[0]
            y = self.mods[lay.name.replace(".", "_")](y)
            if lay.kind == "fc":
                y = y.view(y.shape[0], lay.k, 1, 1)
            want = (lay.c, lay.h, lay.w) if lay.kind == "input" else (lay.k, lay.p, lay.q)
            if check and tuple(y.shape[1:]) != want:
                raise AssertionError(f"{self.net.name} {lay.name}: output {tuple(y.shape[1:])}"
                                     f", the table says {want}")
            out[lay.name] = y
        return y


def dnn_model(name: str, dev):
    """(module, make_input(batch, dtype)) for NicePIM workload *name*."""
    net = network(name)
    if name == "bert_base":
        from transformers import BertConfig, BertModel
        seq = net.layers[0].h
        m = BertModel(BertConfig()).to(dev).eval()

        def make(b, dtype):
            return torch.randint(0, 30522, (b, seq), device=dev)
        return m, make
    m = TableNet(net).to(dev).eval()
    first = net.layers[0]
    with torch.inference_mode():
        m(torch.rand(1, first.c, first.h, first.w, device=dev), check=True)

    def make(b, dtype):
        return torch.rand(b, first.c, first.h, first.w, device=dev, dtype=dtype)
    return m, make


def graph_fn(model, *x):
    """A CUDA graph of ``model(*x)``: its replay (and the graph, to free)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            model(*x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        model(*x)
    return g.replay, g


def measure_dnn(args, result, path) -> None:
    dev = DEV
    rows = result.setdefault("dnn", {})
    for name in args.nets:
        for prec, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
            key = f"{name}/{prec}"
            if key in rows:
                continue
            if _elapsed() > args.budget_s:
                result.setdefault("skipped", []).append(f"dnn {key}: time budget")
                continue
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cudnn.benchmark = True
            torch.manual_seed(0)
            model, make = dnn_model(name, dev)
            model = model.to(dtype)
            row = {"eager": {}, "graph": {}, "errors": {}}
            for mode in ("eager", "graph") if dev.type == "cuda" else ("eager",):
                best = None
                worse = 0
                b = 1
                while b <= args.max_batch and _elapsed() <= args.budget_s:
                    try:
                        with torch.inference_mode():
                            x = make(b, dtype)
                            if mode == "eager":
                                t = cuda_time(lambda model=model, x=x: model(x), 2, args.reps)
                            else:
                                fn, g = graph_fn(model, x)
                                t = cuda_time(fn, 2, args.reps)
                                del g
                    except torch.OutOfMemoryError:
                        row["errors"][f"{mode}/{b}"] = "out of memory"
                        torch.cuda.empty_cache()
                        break
                    except Exception as e:  # a graph capture that fails is recorded
                        row["errors"][f"{mode}/{b}"] = f"{type(e).__name__}: {e}"[:300]
                        torch.cuda.empty_cache()
                        break
                    per = t["median_s"] / b
                    row[mode][str(b)] = t["median_s"]
                    if best is not None and per >= best * 0.98:
                        worse += 1
                        if worse >= 2:
                            break
                    else:
                        worse = 0
                    best = per if best is None else min(best, per)
                    b *= 2
                    torch.cuda.empty_cache()
            per_sample = {m: min((t / int(b), int(b)) for b, t in row[m].items())
                          for m in ("eager", "graph") if row[m]}
            row["best"] = {m: {"seconds_per_sample": v[0], "batch": v[1]}
                           for m, v in per_sample.items()}
            rows[key] = row
            del model
            torch.cuda.empty_cache()
            print(f"{key}: " + ", ".join(f"{m} {v['seconds_per_sample'] * 1e3:.4f} ms/sample "
                                         f"at batch {v['batch']}"
                                         for m, v in row["best"].items())
                  + (f"; errors {row['errors']}" if row["errors"] else ""), flush=True)
            write_json(path, result)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=out_file, required=True,
                    help="output file (an earlier one of the same device is resumed)")
    ap.add_argument("--budget-s", type=number_range(0.0, 86400.0), default=420.0,
                    help="start nothing new after this many seconds (default 420)")
    ap.add_argument("--reps", type=int_range(1), default=10,
                    help="timed runs per point (default 10)")
    ap.add_argument("--max-batch", type=int_range(1), default=1024)
    ap.add_argument("--nets", default=",".join(network_names()),
                    help="NicePIM workloads (default all five)")
    ap.add_argument("--parts", default=",".join(PARTS),
                    help=f"what to measure (default all: {','.join(PARTS)})")
    ap.add_argument("--quick", action="store_true", help="smaller peak probes")
    ap.add_argument("--device", default="cuda",
                    help="cuda (default); cpu checks the script's code paths where no GPU is")
    ap.add_argument("--capsnet-scale", type=int_range(1), default=1,
                    help="divide B and N_L of the Table 1 networks (default 1: full size)")
    args = ap.parse_args(argv)
    global DEV
    args.nets = [n for n in args.nets.split(",") if n]
    bad = [n for n in args.nets if n not in network_names()]
    if bad:
        ap.error(f"--nets: unknown network {bad[0]!r}; one of {', '.join(network_names())}")
    parts = args.parts.split(",")
    bad = [x for x in parts if x not in PARTS]
    if bad:
        ap.error(f"--parts: unknown part {bad[0]!r}; any of {', '.join(PARTS)}")
    path = args.json
    try:
        result = json.loads(path.read_text()) if path.exists() else {}
    except json.JSONDecodeError as e:
        ap.error(f"--json: {path} exists and is not JSON ({e}); remove it or name another")
    if torch is None:
        sys.exit("gpu_measure needs PyTorch (pip install torch) on a machine with a CUDA GPU")
    DEV = torch.device(args.device)
    if DEV.type == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_measure found no CUDA GPU (torch.cuda.is_available() is false); "
                 "--device cpu only checks the script")
    if DEV.type == "cuda":
        p = torch.cuda.get_device_properties(0)
        name, sms, mem = p.name, p.multi_processor_count, p.total_memory
    else:
        name, sms, mem = f"cpu ({platform.processor() or platform.machine()})", 0, 0
    old = result.get("device", {})
    if old and (old.get("name"), old.get("capsnet_scale")) != (name, args.capsnet_scale):
        ap.error(f"--json: {path} holds a run on {old.get('name')} at CapsNet scale "
                 f"{old.get('capsnet_scale')}; name another file")
    result["device"] = {"name": name, "multiprocessors": sms, "memory_bytes": mem,
                        "torch": torch.__version__, "cuda": torch.version.cuda,
                        "cudnn": torch.backends.cudnn.version(),
                        "python": platform.python_version(),
                        "capsnet_scale": args.capsnet_scale}
    failed = 0

    def part(name, fn):
        nonlocal failed
        if name not in parts:
            return
        try:
            fn()
        except Exception:  # one part that breaks leaves the others to run
            failed += 1
            result.setdefault("errors", {})[name] = traceback.format_exc()[-2000:]
            traceback.print_exc()
        write_json(path, result)

    def do_peaks():
        if "peaks" not in result:
            result["peaks"] = peaks(args.quick)
            print("peaks:", result["peaks"], flush=True)
    part("peaks", do_peaks)
    part("capsnet", lambda: measure_capsnet(args, result, path))
    part("profile", lambda: profile_routing(args, result, path))
    part("dnn", lambda: measure_dnn(args, result, path))
    result["seconds"] = _elapsed()
    write_json(path, result)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

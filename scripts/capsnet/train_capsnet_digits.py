"""Train the small digits CapsNet shipped in ``sim/capsnet/weights/digits_capsnet.npz``.

    .venv/bin/python scripts/capsnet/train_capsnet_digits.py [--epochs N] [--seed S] [--out PATH]

Adam on the margin loss, batches of 100 images routed together (the
batch-shared ``b_ij`` of PIM-CapsNet Algorithm 1, as at evaluation), fixed
seed.  Runs in about a minute on two cores.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from pimforge.sim.capsnet.digits_net import EVAL_BATCH, DigitsCapsNet, load_digits_split

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "sim" / "capsnet" / "weights" / "digits_capsnet.npz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    xtr, ytr, xte, yte = load_digits_split()
    net = DigitsCapsNet.init(rng)
    m = {k: np.zeros_like(v) for k, v in net.params().items()}
    s2 = {k: np.zeros_like(v) for k, v in net.params().items()}
    b1, b2, eps, step = 0.9, 0.999, 1e-8, 0
    t0 = time.time()
    for epoch in range(args.epochs):
        order = rng.permutation(len(xtr))
        lr = args.lr * (0.5 ** (epoch // 20))
        total = 0.0
        for s in range(0, len(order), EVAL_BATCH):
            idx = order[s:s + EVAL_BATCH]
            loss, grads = net.loss_and_grads(xtr[idx], ytr[idx])
            total += loss * len(idx)
            step += 1
            for k, g in grads.items():
                m[k] = b1 * m[k] + (1 - b1) * g
                s2[k] = b2 * s2[k] + (1 - b2) * g * g
                mh = m[k] / (1 - b1 ** step)
                vh = s2[k] / (1 - b2 ** step)
                setattr(net, k, getattr(net, k) - lr * mh / (np.sqrt(vh) + eps))
        if epoch % 5 == 4 or epoch == args.epochs - 1:
            acc_tr = np.mean(net.predict(xtr) == ytr)
            acc_te = np.mean(net.predict(xte) == yte)
            print(f"epoch {epoch + 1:3d}  loss {total / len(xtr):.4f}  train {acc_tr:.4f}  "
                  f"test {acc_te:.4f}  ({time.time() - t0:.0f} s)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    net.save(args.out, seed=args.seed, epochs=args.epochs, lr=args.lr,
             test_accuracy=round(float(acc_te), 4))
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()

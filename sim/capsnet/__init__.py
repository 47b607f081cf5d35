"""PIM-CapsNet models in Python: Table 1 networks, Sec. 5.1 workload distribution,
the GPU-baseline roofline, the Sec. 5.2.2 approximate special functions and the
Table 5 accuracy study on a small digits CapsNet."""

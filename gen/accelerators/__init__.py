"""One module per accelerator, each defining ``ACCELERATOR`` (see :mod:`pimforge.gen.registry`).

A module placed here is discovered; ``shared`` holds the hardware that belongs
to no accelerator (FP32 units, the HMC memory system) and its config sections.
"""

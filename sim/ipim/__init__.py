"""iPIM's simulation side: the ``pimforge simb`` tools (and later its compiler and drivers)."""

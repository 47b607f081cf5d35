"""DESCNet: CapsNet/DeepCaps memory profiles, the 32 nm SRAM model and the PG replay."""

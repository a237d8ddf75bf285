"""Pure NumPy sampler kernels. Nothing here imports PyMC or PyTensor (a test enforces it)."""

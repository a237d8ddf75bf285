"""The PyMC/PyTensor boundary: row sources, graph rewriting, the model adapter."""

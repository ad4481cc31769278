"""The minimal torch.distributed pipeline runtime (the only layer that imports torch)."""

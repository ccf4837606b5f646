"""The analytical model, the physics features, the targets and the simulator built on them."""

# Training configuration, read by exec_config.py with exec() (nanoGPT-style config file).
hidden = 32
lr = 0.05
batch_size = 16
steps = 5
weight_decay = 1e-4

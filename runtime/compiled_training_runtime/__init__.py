"""Training runtime of compiled-training: the code that runs inside the training image."""

"""Training runtime of compiled-training: the code that runs inside the training image."""

# The one version of the library and this runtime (CHANGELOG.md says what each changed): both
# packages' metadata read it, and the library pins the runtime to it exactly (setup.py).
__version__ = "0.2.0"

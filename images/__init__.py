"""The runtime images' Dockerfiles, one folder each: the package compiled_training.dockerfiles."""

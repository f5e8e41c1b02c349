"""An instance type CreateTrainingJob refuses gets a hint that helps: a near spelling where one
is meant, the reason where the family trains on nothing SageMaker has (botocore's list)."""

from __future__ import annotations

import pytest

from compiled_training.catalog.instances import instance_type_problem

HEAD = "instance_type must be a SageMaker training instance type such as 'ml.g5.48xlarge', got "


@pytest.mark.parametrize(("instance_type", "hint"), [
    ("ml.inf2.xlarge", " (inf2 is Inferentia, which serves models: train on a GPU or Trainium)"),
    ("ml.inf1.xlarge", " (inf1 is Inferentia, which serves models: train on a GPU or Trainium)"),
    ("ml.trn3.48xlarge", " (did you mean 'ml.trn2.48xlarge'?)"),
    # Misspelt, or without the prefix: the nearest type SageMaker trains on.
    ("ml.g5.12xlage", " (did you mean 'ml.g5.12xlarge'?)"),
    ("g5.48xlarge", " (did you mean 'ml.g5.48xlarge'?)"),
    ("local_gpu", " (local mode does not exist in a pipeline)"),
])
def test_a_refused_instance_type_gets_a_hint_that_fits(instance_type, hint):
    assert instance_type_problem(instance_type) == f"{HEAD}{instance_type!r}{hint}"


def test_a_training_type_is_no_problem():
    assert instance_type_problem("ml.trn2.48xlarge") is None
    assert instance_type_problem("ml.g5.48xlarge") is None

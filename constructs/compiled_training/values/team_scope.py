"""A team's reach, declared once for the role pair a platform team hands it: the pipelines it
names and the data it reads. A pipeline given the roles with the scope takes the team's
statements once for all its teammates, instead of statements of its own."""

from __future__ import annotations

import re
from dataclasses import dataclass

from compiled_training.catalog.aws_names import s3_uri_problem

# A pipeline name's characters (SageMaker's PipelineName: letters, digits and hyphens,
# beginning with a letter or digit), at least two of them: a prefix is what keeps one team's
# pipelines from another's, so a one-letter prefix is refused as too wide to mean a team.
_NAME_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{1,79}")


@dataclass(frozen=True)
class TeamScope:
    """What one role pair serves: every pipeline named ``name_prefix...``, each reading under
    ``data_uris``. Given with ``role=`` and ``pipeline_role=`` (``team_scope=``), a pipeline's
    role statements name the team (jobs tagged with a name under the prefix, the output
    bucket under ``<name_prefix>``, the data URIs), are added to the roles once, and serve
    every teammate: the trade is that one pipeline of the team may describe and stop its
    teammates' jobs and read their outputs. Without a scope, each pipeline's statements name
    it alone.

    ``name_prefix``: the beginning of every team pipeline's name, ``nlp-``; the roles reach
    ``s3://<output bucket>/<name_prefix>*`` and jobs tagged with such a name.
    ``data_uris``: S3 prefixes (``s3://team-data/nlp/``) every channel of a team pipeline
    reads under; the execution role reads there, nowhere else.
    """

    name_prefix: str
    data_uris: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.name_prefix, str) or not _NAME_PREFIX.fullmatch(self.name_prefix):
            problems.append(f"name_prefix must be 2 to 80 letters, digits and hyphens beginning "
                            f"with a letter or digit (a pipeline name's start), got "
                            f"{self.name_prefix!r}")
        if isinstance(self.data_uris, str) or not all(isinstance(u, str) for u in self.data_uris):
            problems.append(f"data_uris must be a sequence of S3 URIs, got {self.data_uris!r}")
        else:
            object.__setattr__(self, "data_uris", tuple(self.data_uris))
            for uri in self.data_uris:
                if problem := s3_uri_problem(uri):
                    problems.append(f"data_uris: {uri!r}: {problem}")
                elif {"*", "?"} & set(uri):
                    problems.append(f"data_uris: {uri!r} must not contain '*' or '?' (IAM "
                                    f"reads them as wildcards)")
                elif not uri.endswith("/"):
                    problems.append(f"data_uris: {uri!r} must end with '/' (a folder: without "
                                    f"it, the grant reaches every key that begins alike, "
                                    f"'{uri}-other/' too)")
        if problems:
            raise ValueError("TeamScope: " + "; ".join(problems))

    def names(self, pipeline_name: str) -> bool:
        return pipeline_name.startswith(self.name_prefix)

    def data_uri_of(self, uri: str) -> str | None:
        """The declared data URI a channel's ``uri`` reads under, or None."""
        return next((data for data in self.data_uris if uri.startswith(data)), None)

    def shared_data(self, other: TeamScope) -> str | None:
        """A data URI of one team's that lies within (or holds) one of the other's, or None."""
        return next((f"{mine} and {theirs}" for mine in self.data_uris
                     for theirs in other.data_uris
                     if mine.startswith(theirs) or theirs.startswith(mine)), None)

    def overlaps(self, other: TeamScope) -> bool:
        """Whether one team's pipeline names could fall under the other's prefix."""
        return (self.name_prefix.startswith(other.name_prefix)
                or other.name_prefix.startswith(self.name_prefix))

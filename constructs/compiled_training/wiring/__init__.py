"""The CDK wiring the constructs share: what they read of a stack once (`stack_reads`), inline
policies with a reason per wildcard (`policy`), suppression metadata for cdk-nag and checkov
(`acknowledgements`), Lambda functions made from `handlers` (`functions`), DLC image URIs in a
stack (`dlc_uri`) and code archives as assets (`assets`).

May import: the CDK, the definition builders and everything below them, and `handlers` (as
asset paths). Not public: the constructs above are its only users.
"""

"""The Lambda functions' sources, one module per function, each shipped alone as its asset.

They run in Lambda, not in the CDK app: standard library and boto3 only, and nothing of the
library (a function's asset holds its one module). The bottom layer: constructs import them
(their paths, a constant), they import nothing back.
"""

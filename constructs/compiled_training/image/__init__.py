"""`RuntimeImage`: the compiled-training runtime built into an ECR image on top of a DLC, by the
deploying machine's Docker or by CodeBuild at deploy time (`_builder`).

May import: `wiring` and everything below it.
"""

"""The Lambda functions' code, one module per function, shipped as assets."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_lambda as lambda_

HANDLERS_DIR = Path(__file__).parent


def handler_code(module: str) -> lambda_.Code:
    """The asset of one handler module, with nothing else in it.

    Only the module: the other handlers and caches from local test runs must not change
    the asset (and so the template).
    """
    return lambda_.Code.from_asset(str(HANDLERS_DIR), exclude=["*", f"!{module}.py"])

"""What the constructs read from CDK, read once.

Every CDK property read and call from Python is a round trip to the jsii kernel's Node
process (a fraction of a millisecond to a few). Many pipelines in one stack ask the stack the
same questions: its region and account, the same ARNs, its shared bucket and code asset.
A stack's environment, the ARNs it formats, a construct's path and an asset's location never
change once made, so each is read once per object (kept weakly: nothing outlives the stack)
and answered from Python after that.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam

from constructs import IConstruct, IValidation

T = TypeVar("T")
_READS: WeakKeyDictionary[Any, dict[Hashable, Any]] = WeakKeyDictionary()


def once(owner: Any, key: Hashable, read: Callable[[], T]) -> T:
    """``read()`` the first time ``owner`` is asked for ``key``; its answer after that. Only
    for what cannot change once ``owner`` exists."""
    reads = _READS.setdefault(owner, {})
    if key not in reads:
        reads[key] = read()
    value: T = reads[key]
    return value


def collected(owner: IConstruct, key: Hashable,
              validation: Callable[[list[T]], IValidation]) -> list[T]:
    """The list ``owner`` collects under ``key`` (pipelines add to it as they are made); the
    first call adds ``validation(the list)`` to ``owner``, which reads it as it is at
    synthesis: one validation for all, not one each."""
    def start() -> list[T]:
        items: list[T] = []
        owner.node.add_validation(validation(items))
        return items

    return once(owner, key, start)


@functools.cache
def aws_partition() -> str:
    """``Aws.PARTITION``, a constant of the CDK (one token for the whole process)."""
    return Aws.PARTITION


def stack_of(scope: IConstruct) -> Stack:
    """``Stack.of(scope)``: no round trip when ``scope`` is a stack (constructs are usually
    made in one) or was made by `made_in`, one per other construct."""
    if isinstance(scope, Stack):
        return scope
    return once(scope, "stack", lambda: Stack.of(scope))


def made_in(construct: IConstruct, scope: IConstruct) -> Stack:
    """The stack of ``construct``, just made in ``scope`` (and not a stack itself): its
    scope's. `stack_of` knows it from now on."""
    stack = stack_of(scope)
    return once(construct, "stack", lambda: stack)


def region(stack: Stack) -> str:
    return once(stack, "region", lambda: stack.region)


def account(stack: Stack) -> str:
    return once(stack, "account", lambda: stack.account)


def app_root(stack: Stack) -> IConstruct:
    return once(stack, "root", lambda: stack.node.root)


def path(construct: IConstruct) -> str:
    """The construct's path (``node.path``)."""
    return once(construct, "path", lambda: construct.node.path)


def default_child(construct: IConstruct) -> IConstruct | None:
    """``construct.node.default_child`` (its CloudFormation resource), read once."""
    return once(construct, "default child", lambda: construct.node.default_child)


def role_arn(role: iam.IRole) -> str:
    """``role.role_arn``: a job's role and the pipeline role's pass grant both name it."""
    return once(role, "role_arn", lambda: role.role_arn)


def format_arn(stack: Stack, **components: Any) -> str:
    """``stack.format_arn(**components)``: the same ARN for the same components."""
    key = ("arn", *sorted(components.items(), key=lambda item: item[0]))
    return once(stack, key, lambda: stack.format_arn(**components))


def free_id(scope: IConstruct, construct_id: str, kind: str) -> None:
    """Raises where ``scope`` already has a child ``construct_id``, naming both, before the
    construct is made: the CDK's own refusal is a JavaScript stack trace through jsii."""
    node = getattr(scope, "node", None)  # not a construct: the type checks say so after
    taken = node.try_find_child(construct_id) if node is not None and isinstance(
        construct_id, str) else None
    if taken is not None:
        where = scope.node.path or "the app"
        raise ValueError(
            f"{kind} id {construct_id!r} is already taken in {where} by "
            f"{type(taken).__name__} {taken.node.path}: construct ids must be unique "
            f"within their scope; give this {kind} another id")


def child(stack: Stack, construct_id: str, kind: type[T],
          create: Callable[[str], T]) -> T:
    """The stack's child ``construct_id`` of type ``kind`` (one made elsewhere too), or
    ``create(construct_id)``'s, made once."""
    def find_or_create() -> T:
        existing = stack.node.try_find_child(construct_id)
        return existing if isinstance(existing, kind) else create(construct_id)

    return once(stack, ("child", construct_id), find_or_create)


def service_principal(stack: Stack, service: str,
                      conditions: dict[str, Any] | None) -> iam.ServicePrincipal:
    """One principal object per service and conditions in a stack (a principal is a value:
    roles may share it)."""
    key = ("principal", service, repr(conditions))
    return once(stack, key, lambda: iam.ServicePrincipal(service, conditions=conditions))


_PIPELINE_NAMES: WeakKeyDictionary[IConstruct, dict[tuple[str, str, str], IConstruct]] = (
    WeakKeyDictionary())


def pipeline_names(app: IConstruct) -> dict[tuple[str, str, str], IConstruct]:
    """The pipeline names taken in an app, (account, region, lowercased name) -> the pipeline
    construct: SageMaker's ARNs are lowercase, so names differing in case collide."""
    return _PIPELINE_NAMES.setdefault(app, {})

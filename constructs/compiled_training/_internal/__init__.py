"""The constructs' internals: definition builders, validation, DLC resolution, policies,
Lambda handlers. Not public API: import from `compiled_training`."""

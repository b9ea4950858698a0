"""Built-in scheduling policies; importing this package registers all of them.

Every module in this package registers its classes with
``scheduler.core.policy.register_app_policy`` / ``register_remap_policy``.
"""

import importlib
import pkgutil

for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")

"""The ``kernelbench`` environment of the verifiers library (``verifiers.v1``): KernelBench problems and op-suite ops,
multi-turn with pytest-kernelbench's sandboxed judge as the feedback. The code lives in :mod:`kbagent.verifiers_env`;
verifiers finds the taskset and the environment through this module's ``__all__``.

    pip install -e environments/kernelbench           # from the pytest-kernelbench checkout
    vf-eval kernelbench --env.taskset.level mini -m MODEL --client.base-url URL --push False   # verifiers 0.4
"""

from kbagent.verifiers_env.loop import KernelBenchEnv
from kbagent.verifiers_env.tasks import KernelBenchTaskset

__all__ = ["KernelBenchEnv", "KernelBenchTaskset"]

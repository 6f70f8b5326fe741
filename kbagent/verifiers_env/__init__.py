"""KernelBench as an environment of the verifiers library's v1 API (``verifiers.v1``; verifiers 0.3.x and 0.4.x), the
shape prime-rl trains on: the taskset ``kernelbench`` (:mod:`.tasks`), its multi-turn episode with the judge's feedback
(:mod:`.loop`), the judge as tools for tool-using harnesses (:mod:`.tools`), and the rewards (:mod:`.scoring`).

Installed as the module ``kernelbench`` (``pip install -e environments/kernelbench``), then with verifiers 0.4::

    vf-eval kernelbench --env.taskset.level 1 --env.max-turns 4 -m MODEL --client.base-url URL --push False

(verifiers 0.3.x names the same command ``eval``). See docs/rl.md. The package itself imports nothing: :mod:`.judging` and
:mod:`.scoring` work without verifiers; :mod:`.tasks`, :mod:`.loop` and :mod:`.tools` need it.
"""

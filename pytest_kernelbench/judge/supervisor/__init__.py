"""The supervisor: one evaluation's trusted side. It never imports candidate code.

    python -m pytest_kernelbench.judge.supervisor SPEC.json     (or forked by the fork server)

It loads the problem (to make inputs), and starts two runner processes (:mod:`pytest_kernelbench.judge.runner`): the
reference's, trusted, as a plain child, and the candidate's in the sandbox (:mod:`pytest_kernelbench.judge.sandbox`),
after a sandboxed build step when the candidate compiles an extension. Both sides are the same code in the same kind of
process with the same settings, so both are timed alike. Every input is made here from a seed drawn from the OS for
that call alone, copied into each side's shared buffers, and every call's output is sealed and compared here.
Statistics, the wall-clock cross-check, the speedup and the result are computed and written here. A runner's replies
are data, checked field by field (:func:`~pytest_kernelbench.judge.protocol.parse_reply`).

Stages are announced on the status file the controller reads (a runner cannot write it); the vocabulary, and which
stages are charged to the candidate, is :mod:`pytest_kernelbench.judge.stages`.

Bottom to top, each module owning one thing:

- :mod:`.plan`: timing and memory policy, constants and pure functions of the problem's footprint;
- :mod:`.record`: the stage clock (``Status``), what the evaluation found (``Findings``), the shared ``Context``;
- :mod:`.device`: the device lock and admission, a quiet GPU, the timing core, the CPU-timing marker;
- :mod:`.sides`: one runner process (``Side``) and ``Runners``: start, ask, freeze, thaw, stop;
- :mod:`.buffers`: fresh inputs and the shared input and output memory of a device phase;
- :mod:`.building`: the sandboxed build step, the compiler settings, the JIT caches;
- :mod:`.timing`: a call on the supervisor's clock, a timed round and its check, the time phase;
- :mod:`.evaluation`: the stage order, and ``main`` (the process);
- ``__main__``: ``python -m`` entry.

Nothing is imported here, so that ``python -m`` starts its clock before torch's import.
"""

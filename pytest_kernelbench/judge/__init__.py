"""The judge, laid out along its process boundary.

Trusted side, which never imports candidate code:
``controller`` (``evaluate()``: starts one supervisor per evaluation and reads its result),
``forkserver`` (supervisors forked from a process that imported torch once), ``supervisor`` (the
stages: reference, compile, init, trials, trace, time, recheck; it makes the inputs, compares,
computes the statistics and the speedup, and writes the result), ``compare``, ``stats``, ``policy``,
``locking``, ``sandbox`` (how a runner is started), ``remote`` (Ray).

Untrusted side: ``runner``, which imports torch and ``protocol`` + ``transport`` only.
Between them: ``protocol`` (named messages) and ``transport`` (framing, descriptors, shared memory).
"""

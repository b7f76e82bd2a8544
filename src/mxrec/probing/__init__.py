"""The pipeline doctor: run a loader configuration briefly, check its batches, find the bound, say what to change.

``verify`` checks the files; this subpackage checks the *running* pipeline -- the other half of the pre-flight
checklist -- and measures where the time goes, inside the real pipeline (the stage timers of
:mod:`mxrec.train.timing`), not a copy of it.

* :mod:`~mxrec.probing.run`: runs an ``ImageRecordIter`` configuration, a torch ``DataLoader`` or a bare
  record read, warm-up excluded, and records timings, batches and stored image sizes;
* :mod:`~mxrec.probing.machine`: CPU per core, the data's block device, memory, GPU memory over the run;
* :mod:`~mxrec.probing.checks`: dtype, value range, shapes, labels, memory (``Check`` s with verdict codes);
* :mod:`~mxrec.probing.labels`: the dataset's label distribution, and how far the batches' labels are from it;
* :mod:`~mxrec.probing.advice`: the bound and the recommendations;
* :mod:`~mxrec.probing.probe`: :func:`probe` (``mxrec.probe``), :class:`ProbeResult`, sweeps;
* :mod:`~mxrec.probing.html`: the result as one self-contained HTML page.

The subpackage is named ``probing`` so that ``mxrec.probe`` stays the function. Library code never prints.
Records are opened with :func:`~mxrec.datasets.shard_set.open_dataset` and read through the
:class:`~mxrec.io.records.Records` contract, whose :meth:`~mxrec.io.records.Records.io_stats` gives the
remote requests and block-cache lookups. May import: :mod:`mxrec.errors`, :mod:`mxrec.storage`, :mod:`mxrec.format`,
:mod:`mxrec.io`, :mod:`mxrec.datasets`, :mod:`mxrec.image`, :mod:`mxrec.transforms`, :mod:`mxrec.train`,
:mod:`mxrec.doctor`.
"""

from mxrec.probing.probe import ProbeResult, probe

__all__ = ["ProbeResult", "probe"]

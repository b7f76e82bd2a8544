"""The dataset doctor: summarising, checking, repairing and looking at RecordIO datasets.

* :mod:`~mxrec.doctor.verify_dataset`: the runner of every check; :mod:`~mxrec.doctor.report`: its result
  (``Report`` of ``Check`` s of ``Problem`` s).
* the checks: :mod:`~mxrec.doctor.check_recordio` (framing, padding, index), :mod:`~mxrec.doctor.check_labels`,
  :mod:`~mxrec.doctor.check_images`, :mod:`~mxrec.doctor.check_leakage` (duplicates, train/val leakage),
  :mod:`~mxrec.doctor.check_lst`, :mod:`~mxrec.doctor.check_layout` (InsightFace face sets); they read one
  pass of facts per record, :mod:`~mxrec.doctor.contents`.
* :mod:`~mxrec.doctor.sets`: ``info`` and ``verify`` of any dataset: one file, a shard set (per shard and in
  total), a mixture (per source, and the mixing) or a dataset already opened (the files it reads).
* :mod:`~mxrec.doctor.dataset_info` (``mxrec info``), :mod:`~mxrec.doctor.stats`, :mod:`~mxrec.doctor.preview`
  (contact sheets), :mod:`~mxrec.doctor.repair` (a clean copy of a damaged file).
* :mod:`~mxrec.doctor.html`: the kit every HTML report is drawn with (pages, and notebook blocks for the
  results' ``_repr_html_``); :mod:`~mxrec.doctor.verify_page`: ``verify --html``, the checks, the offending
  records and the data (samples per class, class histogram, image sizes), read by position.

Library code reports progress through ``progress(done, total)`` callbacks and
never prints. The checks read whole files byte by byte (framing, padding, what lies between records), so they map
them through :mod:`mxrec.storage` rather than reading records. May import: :mod:`mxrec.errors`, :mod:`mxrec.format`,
:mod:`mxrec.storage`, :mod:`mxrec.io`,
:mod:`mxrec.datasets`, :mod:`mxrec.image`.
"""

"""Reports: the JSON report (``writer``), the summary figures (``summary``), the terminal table (``terminal``),
Markdown for docs (``markdown``), baseline files (``baselines``), progress lines (``progress``)."""

"""Names for runs given by file: the file's stem, made unique and telling (the CLI's
``cranfield compare`` and ``cranfield eval`` with several runs, the API's multipart file names,
:func:`cranfield.evaluate_many.evaluate_many` given a sequence of paths). Inputs room: the
comparisons and the evaluations above both name runs by it."""

from __future__ import annotations

from collections import Counter


def run_names(labels: list[str | None]) -> list[str]:
    """Names for runs given by file (the CLI's paths, the API's multipart file names), unique
    and telling: the file name without its directory and extension (``runs/ql.txt`` ->
    ``ql``); where two would share that name, each the shortest path suffix that tells it
    from the others sharing it — the file name when the extensions differ (``ql.txt``,
    ``ql.run``), else as many folders as it takes (``a/results-cata`` and
    ``b/results-cata``; ``x/a/r``, ``y/a/r`` and ``b/r``), without the extension unless that
    is what tells them apart. The same path twice (nothing tells them apart): ``#2``,
    ``#3``... in order. ``-`` is ``stdin``; a run without a file name is ``run{i}``
    (1-based), as an unnamed run of a JSON request."""
    from pathlib import PurePath

    # per run, its path's parts and its file's stem: for each number of folders kept in front
    # of its file's name, (the suffix with the name's stem, with the whole name), made only
    # when needed (a path with fewer folders keeps its longest)
    paths: list[tuple[list[str], str]] = []
    for i, label in enumerate(labels):
        if label in (None, "", "-"):
            paths.append(([], "stdin" if label == "-" else f"run{i + 1}"))
            continue
        path = PurePath(label)
        parts = [p for p in path.parts if p not in (path.anchor, ".")] or [label]
        paths.append((parts, PurePath(parts[-1]).stem or parts[-1]))

    def depths(i: int) -> int:
        return max(1, len(paths[i][0]))

    def at(i: int, depth: int) -> tuple[str, str]:
        parts, stem = paths[i]
        if not parts:
            return stem, stem
        d = min(depth, len(parts) - 1)
        return ("/".join([*parts[len(parts) - 1 - d:-1], stem]),
                "/".join(parts[len(parts) - 1 - d:]))

    out = [at(i, 0)[0] for i in range(len(labels))]
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(out):
        groups.setdefault(name, []).append(i)
    # each clashing run takes the shallowest form no other run of its group has at that
    # depth: counted once per depth over the group (a request's thousand same-named parts
    # cost a thousand forms per depth, not a thousand rivals each)
    for members in groups.values():
        if len(members) < 2:
            continue
        for i in members:  # nothing tells it apart: its whole path (numbered below)
            out[i] = at(i, depths(i) - 1)[1]
        left = members
        for depth in range(max(depths(i) for i in members)):
            if not left:
                break
            forms = {i: at(i, depth) for i in members}
            stems, names = Counter(f[0] for f in forms.values()), Counter(
                f[1] for f in forms.values())
            still = []
            for i in left:
                if stems[forms[i][0]] == 1:
                    out[i] = forms[i][0]
                elif names[forms[i][1]] == 1:
                    out[i] = forms[i][1]
                else:
                    still.append(i)
            left = still
    # the same path twice: numbered; linear in the labels (a request's file names), each
    # name resuming its numbering where it stopped
    unique: list[str] = []
    taken: set[str] = set()
    last: dict[str, int] = {}
    for name in out:
        n = last.get(name, 1)
        chosen = name if n == 1 else f"{name}#{n}"
        while chosen in taken:
            n += 1
            chosen = f"{name}#{n}"
        last[name] = n
        taken.add(chosen)
        unique.append(chosen)
    return unique

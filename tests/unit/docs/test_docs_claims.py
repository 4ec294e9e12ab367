"""What the docs say about the code is what the code has: every role or site variable a doc names
is declared by a role's ``meta/argument_specs.yml`` or read by a playbook, role or plugin; every
default a variables table gives (``| `name` | `default` | ...``) is the role's default; every
repository path a doc names and every link to a file of the repository exists.

A name that has a role's prefix but is not a variable (a metric, a shell variable in a quoted
command) is listed in ``NOT_VARIABLES`` with what it is. A table cell that describes a default in
words (``first `kube_control_plane` host``) is not compared; the test prints how many claims it
checked.
"""

from __future__ import annotations

import pathlib
import re

import jinja2
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOCS = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir() and not p.name.startswith("_"))
PREFIXES = tuple(sorted({f"{role}_" for role in ROLES} | {"poweraware_"}, key=len, reverse=True))
NOT_VARIABLES = {
    "collectd_ip": "a shell variable of the TAS power demo's command (cluster-stack.md quotes it)",
    "collectd_package_0_power_power": "the series collectd exports for RAPL package 0",
    "poweraware_extender_slow_requests_total": "a metric the power extender serves",
    "poweraware_extender_watch_restarts_total": "a metric the power extender serves",
    "prometheus_config_last_reload_successful": "a metric Prometheus exports",
}
PATH_ROOTS = (
    "roles/", "plugins/", "playbooks/", "docs/", "scripts/", "tests/", "lab/", "benchmarks/", "changelogs/",
    "inventory/", "molecule/", "meta/",
)  # fmt: skip
# Paths a doc names that a run makes (not in the repository) or that are relative to every role.
MADE_BY_A_RUN = {"tests/output/", "benchmarks/results/"}


def _specs() -> dict[str, dict]:
    """Every role option; a default that follows a site-wide variable (the image registry, the
    pull secrets, the state) as a site that sets none sees it, which is what the docs' tables give."""
    env = jinja2.Environment(autoescape=False)  # noqa: S701 - YAML values, not HTML
    specs = {}
    for path in ROOT.glob("roles/*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(path.read_text())["argument_specs"].values():
            for name, option in (entry.get("options") or {}).items():
                default = option.get("default")
                if isinstance(default, str) and "{{ poweraware_" in default:
                    option = {**option, "default": yaml.safe_load(env.from_string(default).render())}
                specs[name] = option
    return specs


def _code_names() -> set[str]:
    """Every identifier the product's playbooks, roles and plugins spell."""
    files = [ROOT / "site.yml", *ROOT.glob("playbooks/*.yml"), *ROOT.glob("roles/**/*"), *ROOT.glob("plugins/**/*")]
    text = "\n".join(p.read_text(errors="replace") for p in files if p.is_file() and p.suffix in {".yml", ".j2", ".py"})
    return set(re.findall(r"\b[a-z_][a-z0-9_]*\b", text))


def _inline_code(doc: pathlib.Path) -> list[str]:
    return [token.strip() for token in re.findall(r"`([^`\n]+)`", doc.read_text())]


def test_every_variable_a_doc_names_is_in_the_code():
    specs, code = _specs(), _code_names()
    unknown, checked = [], 0
    for doc in DOCS:
        for token in _inline_code(doc):
            match = re.fullmatch(r"([a-z][a-z0-9_]*)(?:\s*[:=].*)?", token)
            if not match or not match.group(1).startswith(PREFIXES) or match.group(1) in NOT_VARIABLES:
                continue
            checked += 1
            if match.group(1) not in specs and match.group(1) not in code:
                unknown.append(f"{doc.relative_to(ROOT)}: `{token}`")
    assert not unknown, "variables the docs name that no role, playbook or plugin has:\n" + "\n".join(unknown)
    assert checked > 400, checked
    print(f"docs claims: {checked} variable names checked")


def _expand(names: list[str]) -> list[str]:
    """``prometheus_collectd_namespace`` / ``_service``: a name starting with ``_`` continues the
    previous full name without its last word."""
    out, base = [], ""
    for name in names:
        out.append(base + name if name.startswith("_") and base else name)
        if not name.startswith("_"):
            base = name.rsplit("_", 1)[0]
    return out


def _same(written: str, default) -> bool:
    if written.endswith("...") and isinstance(default, str):
        return default.startswith(written[:-3])  # an abbreviated digest
    try:
        value = yaml.safe_load(written) if written else ""
    except yaml.YAMLError:
        value = written
    empty = ("", None)
    return (value in empty and default in empty) or value == default or str(value) == str(default)


def test_every_default_a_variables_table_gives_is_the_roles_default():
    specs = _specs()
    wrong, checked = [], 0
    for doc in DOCS:
        for line in doc.read_text().splitlines():
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))] if line.startswith("|") else []
            if len(cells) < 2 or not re.fullmatch(r"(`_?[a-z][a-z0-9_]*`\s*[/,]?\s*)+", cells[0]):
                continue
            names = _expand(re.findall(r"`(_?[a-z][a-z0-9_]*)`", cells[0]))
            if not all(name in specs for name in names):
                continue
            cell = cells[1]
            if re.fullmatch(r"(empty|none)\b.*", cell) and len(names) == 1:
                values = [""]
            elif re.fullmatch(r"`[^`]*`(\s*[/,]\s*(`[^`]*`|empty))*(\s*\([^)]*\))?", cell):
                values = [v.strip("`") if v != "empty" else "" for v in re.findall(r"`[^`]*`|\bempty\b", cell)]
            else:
                continue  # a default described in words
            if len(values) != len(names):
                continue
            for name, value in zip(names, values, strict=True):
                checked += 1
                if not _same(value, specs[name].get("default")):
                    wrong.append(
                        f"{doc.relative_to(ROOT)}: {name} = `{value}`, the role's is {specs[name].get('default')!r}"
                    )
    assert not wrong, "defaults the docs give that the roles do not have:\n" + "\n".join(wrong)
    assert checked > 150, checked
    print(f"docs claims: {checked} defaults checked")


def _anchors(doc: pathlib.Path) -> set[str]:
    """The anchors GitHub gives a document's headings: lowercase, punctuation but ``-`` and ``_``
    dropped, spaces as ``-``, a repeated one numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    fenced = False
    for line in doc.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not re.match(r"#{1,6} ", line):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(f"{slug}-{count}" if count else slug)
    return anchors


def test_every_path_and_link_a_doc_gives_exists():
    missing, checked = [], 0
    role_relative = {str(p.relative_to(p.parents[1])) for p in ROOT.glob("roles/*/*/*")}
    for doc in DOCS:
        for token in _inline_code(doc):
            if not token.startswith(PATH_ROOTS) or re.search(r"[<>*{}\s]", token):
                continue
            checked += 1
            if token in MADE_BY_A_RUN or token.startswith("tests/output/"):
                continue
            path, _sep, test = token.partition("::")  # a test's id: the file and the function
            if not (ROOT / path.rstrip("/")).exists() and path not in role_relative:
                missing.append(f"{doc.relative_to(ROOT)}: `{token}`")
            elif test and f"def {test.split('[')[0]}(" not in (ROOT / path).read_text():
                missing.append(f"{doc.relative_to(ROOT)}: `{token}` (no such test in {path})")
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            checked += 1
            file, _sep, anchor = target.partition("#")
            linked = doc.parent / file if file else doc
            if not linked.exists():
                missing.append(f"{doc.relative_to(ROOT)}: link ({target})")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                missing.append(f"{doc.relative_to(ROOT)}: link ({target}): no such heading in {file}")
    assert not missing, "paths the docs give that do not exist:\n" + "\n".join(missing)
    print(f"docs claims: {checked} paths and links checked")


def test_the_tarball_the_docs_install_is_the_version_the_build_makes():
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    named = {
        (doc.name, match)
        for doc in DOCS
        for match in re.findall(r"poweraware-k8s-([0-9][^\s/]*?)\.tar\.gz", doc.read_text())
    }
    assert named, "no doc names the tarball to install"
    assert {v for _doc, v in named} == {version}, sorted(named)

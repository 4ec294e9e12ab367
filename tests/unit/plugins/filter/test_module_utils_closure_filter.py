"""plugin_utils/code_closure (the module_utils_closure filter): which collection files a script needs."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.module_utils_closure import module_utils_closure
from ansible_collections.poweraware.k8s.plugins.plugin_utils.code_closure import ClosureError, closure, shipped_files

P = "ansible_collections.poweraware.k8s.plugins.module_utils"


def reader(tree):
    return tree.get


TREE = {
    "pkg/a.py": f"from {P}.pkg.b import X\n",
    "pkg/b.py": "from .c import Y\nX = 1\n",
    "pkg/c.py": "def later():\n    from ..shared import Z\n",
    "shared.py": "import os\nZ = 2\n",
    "pkg/unused.py": "",
}


def test_the_closure_follows_every_import_absolute_relative_and_in_function_bodies():
    assert closure(f"from {P}.pkg import a\n", reader(TREE)) == ["pkg/a.py", "pkg/b.py", "pkg/c.py", "shared.py"]
    assert closure(f"import {P}.shared\nimport json\n", reader(TREE)) == ["shared.py"]
    assert closure(f"from {P} import shared\n", reader(TREE)) == ["shared.py"]
    assert closure("import json\nfrom ansible.module_utils.basic import AnsibleModule\n", reader(TREE)) == []


def test_a_module_the_collection_lacks_is_named_with_its_importer():
    tree = dict(TREE, **{"pkg/b.py": f"from {P}.gone import X\n"})
    with pytest.raises(
        ClosureError, match=r"^plugins/module_utils/pkg/b.py: 'from .*module_utils.gone import X' names no module of"
    ):
        closure(f"from {P}.pkg.a import X\n", reader(tree))
    with pytest.raises(
        ClosureError, match=r"^runner.py: 'from .*module_utils import nope' names no module of the collection \(is"
    ):
        closure(f"from {P} import nope\n", reader(TREE), "runner.py")


def test_a_relative_import_above_the_top_package_and_a_syntax_error_are_refused():
    with pytest.raises(ClosureError, match="relative import beyond the top-level package"):
        closure("from ........... import x\n", reader(TREE))
    with pytest.raises(ClosureError, match=r"^plugins/module_utils/shared.py: not Python \(.*line 1\)"):
        closure(f"from {P} import shared\n", reader({"shared.py": "def (\n"}))


def test_files_are_laid_out_as_the_package_tree():
    files = shipped_files(f"from {P} import shared\n", reader(TREE))
    assert files == [
        {"path": "ansible_collections/poweraware/k8s/plugins/module_utils/shared.py", "content": TREE["shared.py"]}
    ]


def test_the_filter_reads_the_collections_own_files_and_checks_its_input():
    runner = f"from {P}.node_power.cpulist import parse_cpulist\n"
    (entry,) = module_utils_closure(runner, "r.py", "/usr/lib/x/")
    assert entry["path"] == "/usr/lib/x/ansible_collections/poweraware/k8s/plugins/module_utils/node_power/cpulist.py"
    assert "def parse_cpulist" in entry["content"]
    with pytest.raises(AnsibleFilterError, match=r"must be a Python script's text \(got NoneType\)"):
        module_utils_closure(None)
    with pytest.raises(AnsibleFilterError, match=r"directory 'lib' is not an absolute path"):
        module_utils_closure(runner, "r.py", "lib")
    with pytest.raises(
        AnsibleFilterError, match=r"^Nothing was changed: r.py: 'from .*module_utils import nope' names no module"
    ):
        module_utils_closure(f"from {P} import nope\n", "r.py")

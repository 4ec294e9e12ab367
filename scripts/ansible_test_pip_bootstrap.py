"""Provide ansible-test's pip bootstrap script without its download host.

ansible-test creates each sanity venv without pip and bootstraps pip with a `get-pip.py` it
downloads from ci-files.testing.ansible.com, which these machines cannot reach. Its documented
workaround is to save that script as ~/.ansible/test/cache/get_pip_<version>.py. We write an
equivalent script there instead: it runs pip from the official pip wheel (fetched from PyPI,
which is reachable) exactly as get-pip.py does: `pip install --upgrade --force-reinstall <args>`.
"""

import pathlib
import re
import subprocess
import sys

import ansible_test

BOOTSTRAP_TEMPLATE = '''"""pip bootstrap for ansible-test, written by scripts/ansible_test_pip_bootstrap.py."""
import runpy
import sys

WHEEL = {wheel!r}
# get-pip.py options that only make sense for the real script; pip itself does not know them.
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.path.insert(0, WHEEL)
sys.argv = ["pip", "install", "--upgrade", "--force-reinstall", *args]
runpy.run_module("pip", run_name="__main__", alter_sys=True)
'''


def required_pip_version() -> str:
    source = pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
    match = re.search(r"default_packages = dict\(\s*pip='([0-9.]+)'", source.read_text())
    if not match:
        raise SystemExit(f"cannot find ansible-test's pip version in {source}; update this script")
    return match.group(1)


def main() -> int:
    version = required_pip_version()
    cache = pathlib.Path.home() / ".ansible" / "test" / "cache"
    target = cache / f"get_pip_{version.replace('.', '_')}.py"
    wheel_dir = pathlib.Path(sys.argv[1]).resolve()
    wheels = sorted(wheel_dir.glob(f"pip-{version}-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(wheel_dir), f"pip=={version}"],
            check=True,
        )
        wheels = sorted(wheel_dir.glob(f"pip-{version}-*.whl"))
    content = BOOTSTRAP_TEMPLATE.format(wheel=str(wheels[0]))
    if not target.exists() or target.read_text() != content:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(content)
        tmp.replace(target)
        print(f"wrote ansible-test pip {version} bootstrap: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

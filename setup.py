"""Maps the top-level stages/, routers/, kernels/ and pipelines/ folders into the `cascade` package.

pyproject.toml cannot express a package-dir mapping that also discovers subpackages, so the
mapping lives here; all other metadata is in pyproject.toml. `cascade/stages` & co. are symlinks
to the same folders (for static tools: import-linter, editors); discovery skips them, the mapping
installs the folders themselves.
"""

from setuptools import find_packages, setup

MAPPED_FOLDERS = {
    "stages": "cascade.stages",
    "routers": "cascade.routers",
    "kernels": "cascade.kernels",
    "pipelines": "cascade.pipelines",
}

packages = find_packages(
    include=["cascade", "cascade.*"],
    exclude=[f"{p}{tail}" for p in MAPPED_FOLDERS.values() for tail in ("", ".*")],
)
package_dir = {"cascade": "cascade"}
for folder, package in MAPPED_FOLDERS.items():
    package_dir[package] = folder
    packages += [package] + [f"{package}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=package_dir)

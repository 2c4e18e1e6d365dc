"""Maps the top-level stages/, routers/, kernels/ and pipelines/ folders into the `cascade` package.

pyproject.toml cannot express a package-dir mapping that also discovers subpackages, so the
mapping lives here; all other metadata is in pyproject.toml.
"""
from setuptools import find_packages, setup

MAPPED_FOLDERS = {"stages": "cascade.stages", "routers": "cascade.routers",
                  "kernels": "cascade.kernels", "pipelines": "cascade.pipelines"}

packages = find_packages(include=["cascade", "cascade.*"])
package_dir = {"cascade": "cascade"}
for folder, package in MAPPED_FOLDERS.items():
    package_dir[package] = folder
    packages += [package] + [f"{package}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=package_dir)

"""What a worker may read (Landlock's read rules): Python's libraries, the modules imported,
the system's shared libraries, and the GPU's device files for a CUDA job."""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable

__all__ = ["gpu_devices", "library_roots", "readable_roots"]

def readable_roots(extra: Iterable[str] = (), kernel_views: bool = True) -> list[str]:
    """What a worker may read, from an allowlist: Python, the modules imported, system libraries.

    Python's own libraries (:func:`library_roots`: the standard library, the site-packages
    folders on the import path, the shared libraries beside them) and the interpreter's
    file, never a whole installation prefix, which may hold a ``pip.conf`` with an index
    token, a conda env's saved variables or a virtual environment's scripts; for every
    module imported outside them, its package's folder (or a plain module's file), as an
    editable install maps rewardlab's packages to a checkout; the system's shared libraries
    and the few files the C libraries open (the loader cache, time zones, CPU facts,
    ``/dev/null`` and the random devices). No folder merely on ``sys.path``: a script's
    folder (which ``python script.py`` and Ray's workers put there), the working directory
    or a project's root stays unreadable, the ``.env`` beside the script included; nothing
    under ``/home``, ``/root``, ``/tmp`` or the rest of ``/etc``.

    :param extra: more paths (device files, CUDA's ``/sys`` folders).
    :param kernel_views: whether the namespace's ``/proc`` and the cgroup tree are readable.
        A job's companion, which runs the untrusted program, gets neither: they would show
        it the mount table (the machine's folder layout), the cgroups' names and the job's
        command line, and nothing the program computes needs them (its libraries are loaded
        before it is confined).
    """
    libraries = library_roots()
    roots = libraries | {os.path.realpath(sys.executable)}
    roots |= _imported_outside(libraries)
    roots |= {"/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib", "/usr/share/zoneinfo",
              "/etc/ld.so.cache", "/etc/localtime", "/sys/devices/system/cpu",
              "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"}
    if kernel_views:
        roots |= {"/proc", "/sys/fs/cgroup"}
    roots |= set(extra)
    return sorted(root for root in roots if os.path.exists(root))


def library_roots() -> set[str]:
    """The folders of Python's libraries, real paths (Landlock's rules hold for what a path
    leads to): see :func:`_library_folders`."""
    return {os.path.realpath(path) for path in _library_folders()}


def _library_folders() -> set[str]:
    """The standard library (its extension modules included), each site-packages folder on
    the import path, and each prefix's ``lib`` folders, where a conda env keeps the shared
    libraries its packages load (a virtual environment's holds its site-packages only); as
    written, links unresolved."""
    paths = sysconfig.get_paths()
    found = {paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"]}
    found |= {path for path in sys.path
              if os.path.basename(path) in ("site-packages", "dist-packages")}
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        found |= {os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")}
    return {os.path.normpath(path) for path in found if path and os.path.isdir(path)}


def _imported_outside(roots: set[str]) -> set[str]:
    """The top-level package folders and module files of the imported modules that lie
    outside ``roots``: a package's folder once, not one rule per submodule.

    Paths are taken as written, links unresolved (Landlock's rules hold for what a path
    leads to): a module inside a root through a link is not added (the root's rule covers
    what lies inside it, and nothing else is read through the link), one outside through a
    link adds what it leads to only."""
    found: set[str] = set()
    inside = tuple(root + os.sep for root in roots | _library_folders())
    for module in list(sys.modules.values()):
        # read from the module's namespace: getattr would run lazy modules' __getattr__
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        # __path__ of a package is a list (or a namespace path); torch's ops modules fake one
        package = namespace.get("__path__")
        try:
            paths = [] if package is None else [path for path in package if isinstance(path, str)]
        except TypeError:
            paths = []
        file = namespace.get("__file__")
        for path in paths or ([file] if isinstance(file, str) else []):
            path = os.path.normpath(path)
            outside = not path.startswith(inside) and path not in roots
            if os.path.isabs(path) and path != os.sep and outside:
                found.add(path)
    # a package's folder covers its submodules' (rewardlab's packages map to several folders)
    return {path for path in found if not any(path.startswith(other + os.sep) for other in found)}


def gpu_devices() -> list[str]:
    """The NVIDIA device files a CUDA job opens (``/dev/nvidia*``, ``/dev/nvidia-caps``),
    those that exist here; CUDA also reads ``/sys/bus/pci`` and ``/sys/devices``, which
    :func:`readable_roots` adds when given them as ``extra``."""
    import glob

    return sorted(path for path in glob.glob("/dev/nvidia*") if not os.path.isdir(path))

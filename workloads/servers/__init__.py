"""The servers cmx talks to, one module each behind one interface (:class:`base.Server`), found
by service name (workloads/vocab/services.py). Adding a server is four places: its names in the
vocabulary (workloads/vocab/services.py, workloads/vocab/kinds.py), its module here (listed in
:mod:`.registry`), its role (roles/) and the plays that run the role (engine/hosts/playbooks/)."""

"""cmx.engine.hosts: every place cmx imports Ansible is in this package, so this is where the one
warning Ansible's import prints on every command is filtered (issue 51): cryptography's
``CryptographyDeprecationWarning: DSA is deprecated…``, raised when Ansible's SSH agent module
imports the DSA key type. Only that category, message and importer; every other warning stays."""

import warnings

try:
    from cryptography.utils import CryptographyDeprecationWarning
except ImportError:  # no cryptography: Ansible will not import it either
    pass
else:
    warnings.filterwarnings(
        "ignore", message="DSA is deprecated", category=CryptographyDeprecationWarning, module=r"ansible\."
    )

"""The contract review (D29): what an edit of an OpenAPI document changes for its
clients, each finding named by its oasdiff rule id and level, with the line of the YAML.

`load_document` reads a document, `diff_documents` compares two, and `report` prints the
findings as text, markdown, JSON or a changelog. Pure Python over PyYAML: no web framework
and no click here (the `petstore contract` commands are in app/cli/contract.py).
"""

from app.core.contract.catalog import ERR, INFO, RULES, SEVERITY, WARN, Finding
from app.core.contract.loader import ContractError, Document, load_document
from app.core.contract.rules import diff_documents

__all__ = ["ERR", "INFO", "RULES", "SEVERITY", "WARN", "ContractError", "Document", "Finding",
           "diff_documents", "load_document"]

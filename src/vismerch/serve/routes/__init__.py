"""One module per resource; each exposes ``router`` (an APIRouter) and only parses, calls the
service layer and renders."""

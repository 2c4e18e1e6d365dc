"""Evidence for a question: what it asks for, and where on the page or frame that is."""

"""From a query to an answer: its checks, the training domain, the model card, the answer."""

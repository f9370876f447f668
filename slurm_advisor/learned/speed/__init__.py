"""The site's speed model: vocabulary, features, network, fit, ensemble (see ``learned``)."""

"""The live dashboard: a web page of the engines' state, served on the operators' HTTP endpoint."""

"""Where watch events come from: manifest files and folders, read and checked."""

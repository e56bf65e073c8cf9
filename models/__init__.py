"""Model management: finding, inspecting, vetting, deriving and downloading GGUF files. No Qt."""

import verifiers.v1 as vf


class AddToolToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "add_tool"

    @vf.tool
    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        return a + b


if __name__ == "__main__":
    AddToolToolset.run()

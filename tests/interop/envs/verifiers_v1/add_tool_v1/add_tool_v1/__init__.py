from add_tool_v1.taskset import AddToolTaskset

__all__ = ["AddToolTaskset"]

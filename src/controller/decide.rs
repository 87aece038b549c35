//! The AgentRun state machine.

//! The creature data set: loaded from JSON once at start, read-only afterwards.

use std::collections::HashMap;

use serde::Deserialize;

use crate::Error;

/// The data set the demo ships: invented creatures, written for this project.
pub const BUILTIN_JSON: &str = include_str!("../data/creatures.json");

/// A `{minimum, maximum}` pair of measurements, kept as the strings the data file has
/// (`"5.25kg"`), because the unit is part of the value.
#[derive(Clone, Debug, Deserialize, juniper::GraphQLObject)]
#[graphql(description = "A range of measurements, with the unit in the string (\"5.4kg\").")]
pub struct Dimension {
    /// Smallest known value, unit included.
    pub minimum: String,
    /// Largest known value, unit included.
    pub maximum: String,
}

/// One attack of a creature.
#[derive(Clone, Debug, Deserialize, juniper::GraphQLObject)]
#[graphql(description = "One attack a creature knows.")]
pub struct Attack {
    /// Name of the attack.
    pub name: String,
    /// Element of the attack (`type` in GraphQL and in the data file).
    #[serde(rename = "type")]
    #[graphql(name = "type")]
    pub kind: String,
    /// Damage the attack does.
    pub damage: i32,
}

/// The two attack lists of a creature.
#[derive(Clone, Debug, Default, Deserialize, juniper::GraphQLObject)]
#[graphql(description = "The fast and the special attacks of a creature.")]
pub struct Attacks {
    /// Quick attacks.
    #[serde(default)]
    pub fast: Vec<Attack>,
    /// Charged attacks.
    #[serde(default)]
    pub special: Vec<Attack>,
}

/// What a creature needs to evolve.
#[derive(Clone, Debug, Deserialize)]
pub struct EvolutionRequirement {
    /// How many items.
    pub amount: i32,
    /// Which item.
    pub name: String,
}

/// An evolution as written in the data file: the numeric id of the target (the original
/// data shape uses `26`, not `"026"`) and its name.
#[derive(Clone, Debug, Deserialize)]
struct EvolutionRecord {
    id: IdRef,
    name: String,
}

/// The data file may give an evolution target as a number or as the target's id string.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum IdRef {
    Number(u64),
    Text(String),
}

/// A link from a creature to a later stage of its family, resolved at load time so that a
/// query never meets a dangling reference.
#[derive(Clone, Debug)]
pub struct Evolution {
    /// Index of the target in [`Dataset::creatures`].
    pub(crate) index: usize,
    /// The target's id, in the same form as the `id` of a [`Creature`].
    pub id: String,
    /// The target's name.
    pub name: String,
}

/// One creature record. Every key of the data shape is kept, also those the schema does
/// not serve yet: docs/gql-extending.md adds them as fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Creature {
    /// Zero-padded id, `"001"`.
    pub id: String,
    /// Unique name, matched exactly by `creature(name:)`.
    pub name: String,
    /// A short description, `"Spark Pup Creature"`.
    pub classification: Option<String>,
    /// Elements of the creature.
    pub types: Vec<String>,
    /// Elements the creature resists.
    pub resistant: Vec<String>,
    /// Elements the creature is weak against.
    pub weaknesses: Vec<String>,
    /// Weight range.
    pub weight: Dimension,
    /// Height range.
    pub height: Option<Dimension>,
    /// Chance to run away.
    pub flee_rate: Option<f64>,
    /// Highest combat power.
    pub max_cp: Option<i32>,
    /// Highest hit points.
    pub max_hp: Option<i32>,
    /// Fast and special attacks.
    pub attacks: Attacks,
    /// Later stages of the family, empty for a final stage.
    pub evolutions: Vec<Evolution>,
    /// What the next stage costs.
    pub evolution_requirements: Option<EvolutionRequirement>,
}

/// A record as it appears in the data file. Unknown keys are ignored so that a data file can
/// grow ahead of the schema.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreatureRecord {
    id: String,
    name: String,
    classification: Option<String>,
    #[serde(default)]
    types: Vec<String>,
    #[serde(default)]
    resistant: Vec<String>,
    #[serde(default)]
    weaknesses: Vec<String>,
    weight: Dimension,
    height: Option<Dimension>,
    flee_rate: Option<f64>,
    #[serde(rename = "maxCP")]
    max_cp: Option<i32>,
    #[serde(rename = "maxHP")]
    max_hp: Option<i32>,
    #[serde(default)]
    attacks: Attacks,
    #[serde(default)]
    evolutions: Vec<EvolutionRecord>,
    evolution_requirements: Option<EvolutionRequirement>,
}

/// All creatures, with the lookup tables the resolvers use.
#[derive(Debug)]
pub struct Dataset {
    creatures: Vec<Creature>,
    by_name: HashMap<String, usize>,
    by_id: HashMap<String, usize>,
    /// Numeric value of each id, so that `creatureById(id: "7")` finds `"007"`.
    by_number: HashMap<u64, usize>,
}

impl Dataset {
    /// The invented data set shipped in the crate (`data/creatures.json`).
    pub fn builtin() -> Self {
        // The shipped file is checked by this crate's tests; failing here is a build defect,
        // not bad input.
        Self::from_json(BUILTIN_JSON).expect("the shipped creature data is valid")
    }

    /// Parses and checks a data file: a JSON array of creature records.
    ///
    /// Ids and names must be unique and non-empty, and every evolution must name an existing
    /// creature, so that resolvers never meet a dangling link.
    ///
    /// ```
    /// let data = gql_demo::Dataset::from_json(
    ///     r#"[{"id": "001", "name": "Blip", "weight": {"minimum": "1kg", "maximum": "2kg"}}]"#,
    /// )?;
    /// assert_eq!(data.creatures()[0].name, "Blip");
    /// assert!(gql_demo::Dataset::from_json("[{}]").is_err());
    /// # Ok::<(), gql_demo::Error>(())
    /// ```
    pub fn from_json(text: &str) -> Result<Self, Error> {
        let records: Vec<CreatureRecord> = serde_json::from_str(text).map_err(Error::DataJson)?;
        let mut by_name = HashMap::new();
        let mut by_id = HashMap::new();
        let mut by_number = HashMap::new();
        for (index, record) in records.iter().enumerate() {
            if record.id.trim().is_empty() || record.name.trim().is_empty() {
                return Err(Error::DataInvalid(format!(
                    "record {index} has an empty id or name"
                )));
            }
            if by_id.insert(record.id.clone(), index).is_some() {
                return Err(Error::DataInvalid(format!("duplicate id {:?}", record.id)));
            }
            if by_name.insert(record.name.clone(), index).is_some() {
                return Err(Error::DataInvalid(format!(
                    "duplicate name {:?}",
                    record.name
                )));
            }
            if let Ok(number) = record.id.parse::<u64>() {
                by_number.entry(number).or_insert(index);
            }
        }
        let mut creatures = Vec::with_capacity(records.len());
        for record in &records {
            let mut evolutions = Vec::with_capacity(record.evolutions.len());
            for evolution in &record.evolutions {
                let target = match &evolution.id {
                    IdRef::Number(n) => by_number.get(n),
                    IdRef::Text(s) => by_id.get(s),
                };
                let Some(&target) = target else {
                    return Err(Error::DataInvalid(format!(
                        "{} evolves into unknown id {:?}",
                        record.name, evolution.id
                    )));
                };
                let target_record = &records[target];
                if target_record.name != evolution.name {
                    return Err(Error::DataInvalid(format!(
                        "{} evolves into id {} named {:?}, but that record is named {:?}",
                        record.name, target_record.id, evolution.name, target_record.name
                    )));
                }
                evolutions.push(Evolution {
                    index: target,
                    id: target_record.id.clone(),
                    name: target_record.name.clone(),
                });
            }
            creatures.push(Creature {
                id: record.id.clone(),
                name: record.name.clone(),
                classification: record.classification.clone(),
                types: record.types.clone(),
                resistant: record.resistant.clone(),
                weaknesses: record.weaknesses.clone(),
                weight: record.weight.clone(),
                height: record.height.clone(),
                flee_rate: record.flee_rate,
                max_cp: record.max_cp,
                max_hp: record.max_hp,
                attacks: record.attacks.clone(),
                evolutions,
                evolution_requirements: record.evolution_requirements.clone(),
            });
        }
        Ok(Self {
            creatures,
            by_name,
            by_id,
            by_number,
        })
    }

    /// Every creature, in data file order.
    pub fn creatures(&self) -> &[Creature] {
        &self.creatures
    }

    /// The creature with exactly this name (case-sensitive, as the original demo).
    pub fn by_name(&self, name: &str) -> Option<&Creature> {
        self.by_name.get(name).map(|&i| &self.creatures[i])
    }

    /// The creature with this id; a numeric id also matches its zero-padded form.
    pub fn by_id(&self, id: &str) -> Option<&Creature> {
        let index = self.by_id.get(id).copied().or_else(|| {
            id.parse::<u64>()
                .ok()
                .and_then(|n| self.by_number.get(&n).copied())
        })?;
        Some(&self.creatures[index])
    }

    /// The target of an evolution link (always present: links are checked at load).
    pub fn evolution_target(&self, evolution: &Evolution) -> &Creature {
        &self.creatures[evolution.index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_has_at_least_fifty_records_with_links() {
        let data = Dataset::builtin();
        assert!(data.creatures().len() >= 50);
        let with = data
            .creatures()
            .iter()
            .filter(|c| !c.evolutions.is_empty())
            .count();
        assert!(with > 0 && with < data.creatures().len());
        assert_eq!(data.by_id("1").unwrap().id, "001");
        assert_eq!(data.by_id("001").unwrap().name, data.creatures()[0].name);
        assert!(data.by_name("nobody").is_none());
    }

    #[test]
    fn rejects_broken_files() {
        let w = r#""weight": {"minimum": "1kg", "maximum": "2kg"}"#;
        let cases = [
            ("not json", "not valid JSON"),
            (r#"{"id": "1"}"#, "not valid JSON"),
            (&format!(r#"[{{"id": "", "name": "A", {w}}}]"#), "empty id"),
            (
                &format!(r#"[{{"id": "1", "name": "A", {w}}}, {{"id": "1", "name": "B", {w}}}]"#),
                "duplicate id",
            ),
            (
                &format!(r#"[{{"id": "1", "name": "A", {w}}}, {{"id": "2", "name": "A", {w}}}]"#),
                "duplicate name",
            ),
            (
                &format!(
                    r#"[{{"id": "1", "name": "A", {w}, "evolutions": [{{"id": 9, "name": "Z"}}]}}]"#
                ),
                "unknown id",
            ),
            (
                &format!(
                    r#"[{{"id": "1", "name": "A", {w}, "evolutions": [{{"id": 2, "name": "Z"}}]}}, {{"id": "2", "name": "B", {w}}}]"#
                ),
                "named \"Z\"",
            ),
        ];
        for (text, expected) in cases {
            let err = Dataset::from_json(text).unwrap_err().to_string();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }
}
